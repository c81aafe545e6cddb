"""Every oracle and trace checker."""
