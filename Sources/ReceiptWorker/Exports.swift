// The worker's configuration (its own target), for every file of the worker and whoever runs one.
@_exported import Configuration
