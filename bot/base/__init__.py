"""The bottom floor: values and errors every feature uses, importing no feature."""
