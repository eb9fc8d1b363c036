print("itsme-relay-load: not yet")
