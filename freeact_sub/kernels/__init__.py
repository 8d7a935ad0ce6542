"""The kernels code runs in: local and gateway backends, the launcher and zygote, the pool, the cell reader."""
