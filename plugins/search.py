"""Built-in search plugin."""
