"""Built-in analytics plugin."""
