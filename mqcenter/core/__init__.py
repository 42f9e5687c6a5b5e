"""Cross-cutting code every app uses: errors, token auth and scopes, console roles, audit, database helpers, metrics, operations endpoints."""
