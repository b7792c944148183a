"""The device side: the device worker, the device link that holds only a device key, and
running an offered call on the device."""
