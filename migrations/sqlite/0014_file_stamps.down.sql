DROP TABLE IF EXISTS file_stamps;
