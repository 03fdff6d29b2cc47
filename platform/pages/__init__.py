"""The site's pages built on the apps below: the catalog and each problem's page, the submit and
submission pages, leaderboards and comparisons, and the admin of problems, hardware, submissions,
evaluations and model names (whose actions queue by the ranking)."""
