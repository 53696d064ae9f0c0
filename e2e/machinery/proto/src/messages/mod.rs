//! Field tables of the messages reachable from the kinds in [`crate::kinds`]: per field, the Go
//! JSON name and the `omitempty`/pointer rule of [`crate::go_json`].
//!
//! Transcribed from the Go struct tags (`json:"…"`, `protobuf:"…,name=…"`) of `types.go` in
//! k8s.io/api and k8s.io/apimachinery v0.35, the release `k8s-pb` 0.9 was generated from. One
//! `json_table!` entry per Go struct, fields in Go order.

mod batch;
mod core;
mod meta;
mod policy;
