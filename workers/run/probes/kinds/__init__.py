"""The built-in probe kinds: one class a module; every module here is loaded as one."""
