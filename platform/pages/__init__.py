"""The site's pages built on the apps below: the catalog and each problem's page, the submit and
submission pages, leaderboards and comparisons, model names on the account page, and the admin of
problems, hardware, submissions and evaluations (whose actions queue by the ranking)."""
