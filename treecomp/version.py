"""treecomp's version (a module of its own: the lowest layer reads it without importing the
package)."""

__version__ = "0.1.0"
