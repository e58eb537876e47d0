"""Built-in plugins, loaded through the same plugin manager as third-party ones."""
