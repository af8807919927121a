"""The checkpoint connector: offset-sync history, translation, checkpoints, group sync, its Spark job."""
