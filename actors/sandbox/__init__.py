"""The stdio sandbox: what a spawned backend may read, write, reach and use (README: "Sandboxing stdio
backends").

probe.py finds what this kernel and user allow, plan.py decides which engine enforces which rule, launch.py
turns a backend's command into the sandboxed one (bwrap, then this package's launcher), exec.py is that
launcher, run as the child: rlimits, no_new_privs, Landlock, seccomp, then exec of the backend's program.
"""
