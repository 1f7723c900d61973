"""The core every stage stands on: devices, files, checkpoints, token data, batches, schedule, optimizer."""
