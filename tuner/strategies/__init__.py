"""Search strategies behind one contract (see base.py); registry.py names them."""
