"""The cloud side of device calls, for a device that holds only a device key: register its
tools, lease it its next call, renew the lease, hand out checksum-bound upload targets, and
verify and commit each result once before completing the Temporal activity by its task
token. The gateway's device routes translate HTTP to and from it
(workers/gateway/routes_devices.py); this package file imports nothing."""
