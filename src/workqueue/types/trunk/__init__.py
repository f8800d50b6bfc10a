"""The `trunk` item type: post-merge validation of the heads that land on a branch."""
