"""Built-in seed sources, one module each; importing a module registers its source."""
