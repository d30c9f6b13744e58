"""kael's code generator: native_functions.yaml -> C++ and Python binding sources."""
