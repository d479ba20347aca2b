"""RKNN (rknn-toolkit2) as a toolchain plug-in: placement adapter, simulator, workers, probe runner, table builder."""
