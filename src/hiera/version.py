"""The package version, in a leaf module: manifests and the server record it without importing the package root."""

__version__ = "0.1.0"
