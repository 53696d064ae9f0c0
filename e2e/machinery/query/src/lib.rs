//! Label and field selectors and the RBAC authorizer of the local control plane: parsing, matching, and the real API server's wording.
