//! The localkube core controllers: EndpointSlices and Endpoints, PV provisioner, garbage collector, namespace deletion, ServiceAccounts and root CA, PodDisruptionBudget status
