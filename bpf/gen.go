// Package bpf holds the RST probe's eBPF program (rst.c) and the Go bindings
// bpf2go generates from it. The generated rst_bpfel.go / rst_bpfel.o are
// committed; `make generate` rebuilds them and `make check-generate` fails
// when the committed files are out of date. internal/rst loads them.
package bpf

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel -type rst_event -type counter_key -type watch_val -type ip_key -type port_key Probe rst.c
