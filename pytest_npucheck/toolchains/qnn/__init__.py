"""QNN (onnxruntime-qnn, HTP backend) as a toolchain plug-in: placement adapter, emulator, workers, probe runner, table builder."""
