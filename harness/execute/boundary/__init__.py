"""What a process does to itself before untrusted code runs in it: the operating system's boundary.

Namespaces, seccomp, capabilities, Landlock and resource limits, applied in the worker's process before its candidate."""
