"""Built-in backend stacks, one module each; importing a module registers its stacks."""
