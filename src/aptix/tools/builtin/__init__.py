"""The tools that ship with Aptix, one module each."""
