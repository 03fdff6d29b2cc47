"""The evaluation library: judge a solution against a problem on N ranks.

Importing the package is cheap and torch-free; torch is loaded only in rank processes.
"""
