"""What every page and the API share: Chart.js configurations, query-string parameters, the
site's middleware, its template context and number formatting. Imports no other app."""
