"""The `trafficsplit` command line: thin argparse shells over the pure core, so a preview is what the dataplane does."""
