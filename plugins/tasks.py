"""Built-in tasks plugin: task_status, my_tasks and cancel_task in every department."""
