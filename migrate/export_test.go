package migrate

// MovedManagedFields is movedManagedFields, for the integration tests of package migrate_test.
var MovedManagedFields = movedManagedFields
