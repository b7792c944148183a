"""The device side: the device link that holds only a device key and reaches the cloud
through the gateway, and running an offered call on the device. The device worker process
itself is in workers/process/device_worker.py."""
