// Package bpf holds netdrift's eBPF programs and the Go bindings bpf2go
// generates from them: the RST probe (rst.c, probe_bpfel.*; internal/rst
// loads it) and the nf_tables commit stamp (stamp.c, stamp_bpfel.*; the
// change feed internal/datapath/nfevents attaches it) and the map-write
// stamp (mapstamp.c, mapstamp_bpfel.*; the Cilium reader
// internal/datapath/cilium attaches it). The generated files
// are committed; `make generate` rebuilds them and `make check-generate`
// fails when the committed files are out of date.
package bpf

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel -type rst_event -type counter_key -type watch_val -type ip_key -type port_key Probe rst.c
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel Stamp stamp.c
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel -type map_stamp Mapstamp mapstamp.c
