"""Python rules inside the worker, each naming what it protects that the OS boundary does not."""
