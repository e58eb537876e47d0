"""Built-in billing plugin."""
