"""Command-line client for the platform's JSON API: submit one file or a directory of generated
solutions, show progress, wait for results. `python -m pkbcli --help`."""
