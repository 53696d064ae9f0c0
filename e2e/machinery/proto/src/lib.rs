//! Kubernetes protobuf request bodies (the k8s\0 envelope) decoded into the JSON the API server stores, for the kinds real clients send as protobuf.
