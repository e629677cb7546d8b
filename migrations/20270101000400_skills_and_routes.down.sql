DROP TABLE a2a_routes;
DROP TABLE agent_skills;
