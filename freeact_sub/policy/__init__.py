"""Who may run what: approval rules and standing decisions, and the hooks a person wrote."""
