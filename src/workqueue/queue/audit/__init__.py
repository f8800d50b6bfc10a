"""The audit trail: `log` writes every entry (logs, an optional bucket), `history` keeps the
committed ones in the database, `repository` is their SQL, `config` the `audit:` section."""
