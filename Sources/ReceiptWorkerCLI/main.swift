print("receipt-worker: the worker pipeline is not built yet")
