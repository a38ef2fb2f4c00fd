"""The controller runtime: client, informer, work queue, controller, leader election, patch, events, metrics."""
