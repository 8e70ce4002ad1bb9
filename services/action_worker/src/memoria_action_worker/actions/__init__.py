"""Built-in actions, one module each. Every module here is imported at start-up."""
