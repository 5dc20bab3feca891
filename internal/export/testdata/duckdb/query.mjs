// Runs each SQL statement given as an argument with DuckDB, in the
// current directory, and prints its rows as one line of JSON.
import { DuckDBInstance } from '@duckdb/node-api';

const db = await DuckDBInstance.create(':memory:');
const connection = await db.connect();
for (const sql of process.argv.slice(2)) {
  const result = await connection.runAndReadAll(sql);
  console.log(JSON.stringify(result.getRowObjectsJson()));
}
