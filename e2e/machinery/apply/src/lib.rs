//! Server-side apply for the local control plane: field ownership in managedFields (FieldsV1), conflicts between managers, and the merge of an applied configuration.
