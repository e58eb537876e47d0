"""Built-in reports plugin."""
