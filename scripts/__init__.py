"""Developer scripts run by CI."""
